package interop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsShowTheExamples keeps docs/operators.md's copy-paste examples the objects the tests create.
func TestDocsShowTheExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operators.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(repoRoot, "examples", "operators", "*.yaml"))
	if err != nil || len(files) != 10 {
		t.Fatalf("examples/operators/*.yaml: %v %v, want 10 files", files, err)
	}
	for _, f := range files {
		example, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "```yaml\n"+string(example)+"```\n") {
			t.Errorf("docs/operators.md does not show %s as it is: copy it into its yaml block", filepath.Base(f))
		}
	}
}
