// Command kubectl-gang is the kubectl plugin "kubectl gang": where the gangs (PodGroups) of
// custom-scheduler stand and what each waits for, read from the API alone.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/gangctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := gangctl.NewCommand(os.Stdout, time.Now, nil).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
