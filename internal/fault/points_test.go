package fault

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPointsAreHit: every point of the catalogue is hit somewhere in the
// code, and every fault.Hit names a point of the catalogue (directly, or
// through a constant whose value is one), so that `nacre fault arm`
// refuses exactly the names that would never fire.
func TestPointsAreHit(t *testing.T) {
	hit := regexp.MustCompile(`fault\.Hit\(("[^"]+"|[A-Za-z]+)\)`)
	constant := regexp.MustCompile(`(?m)^\s*(?:const\s+)?(Fault[A-Za-z]+)\s*=\s*"([^"]+)"`)
	consts := map[string]string{}
	var used []string
	err := filepath.Walk("..", func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range constant.FindAllStringSubmatch(string(b), -1) {
			consts[m[1]] = m[2]
		}
		for _, m := range hit.FindAllStringSubmatch(string(b), -1) {
			used = append(used, m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, u := range used {
		name := strings.Trim(u, `"`)
		if !strings.HasPrefix(u, `"`) {
			v, ok := consts[u]
			if !ok {
				t.Errorf("fault.Hit(%s): no constant Fault... = \"name\" found for it", u)
				continue
			}
			name = v
		}
		seen[name] = true
		if _, ok := Points[name]; !ok {
			t.Errorf("fault point %q is hit but not in Points", name)
		}
	}
	for name := range Points {
		if !seen[name] {
			t.Errorf("fault point %q is in Points but hit nowhere", name)
		}
	}
}
