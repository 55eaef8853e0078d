package leader

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestAwait runs before TestLeads (the files' order) publishes a configuration: this process does not
// lead, so only started, or the context's end, stops the wait.
func TestAwait(t *testing.T) {
	if Leads() {
		t.Fatal("Leads() before anything was published: the test cannot tell Await's exits apart")
	}
	var polls atomic.Int32
	if !Await(context.Background(), time.Millisecond, func() bool { return polls.Add(1) == 3 }) {
		t.Error("Await = false, want true once started reports the work begun")
	}
	if n := polls.Load(); n != 3 {
		t.Errorf("started was polled %d times, want 3 (it stops at the first true)", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if Await(ctx, time.Millisecond, func() bool { return false }) {
		t.Error("Await = true, want false: the context ended, and nothing leads or started")
	}
}
