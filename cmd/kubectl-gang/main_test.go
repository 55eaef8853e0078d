package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain runs main itself when asked to (see TestExitCode).
func TestMain(m *testing.M) {
	if os.Getenv("KUBECTL_GANG_RUN_MAIN") == "1" {
		os.Args = append([]string{"kubectl-gang"}, strings.Fields(os.Getenv("KUBECTL_GANG_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestExitCode: a failure prints one "error: ..." line on stderr and exits 1; help exits 0.
func TestExitCode(t *testing.T) {
	cases := []struct {
		args       string
		wantCode   int
		wantStderr string
	}{
		{args: "get --kubeconfig /nonexistent/kubeconfig", wantCode: 1, wantStderr: "error: reading the kubeconfig"},
		{args: "explain", wantCode: 1, wantStderr: "error: accepts 1 arg(s), received 0"},
		{args: "get -o table", wantCode: 1, wantStderr: `error: unknown output format "table"`},
		{args: "--help", wantCode: 0},
	}
	for _, tc := range cases {
		t.Run(tc.args, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "KUBECTL_GANG_RUN_MAIN=1", "KUBECTL_GANG_ARGS="+tc.args, "KUBECONFIG=/nonexistent/kubeconfig")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode || !strings.HasPrefix(stderr.String(), tc.wantStderr) {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr starting %q", code, stderr.String(), tc.wantCode, tc.wantStderr)
			}
		})
	}
}
