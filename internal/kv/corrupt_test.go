package kv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A store whose table file was damaged: a read of it fails with an
// error, and one line names the store, the file and what to do. Before,
// pebble's default for this stopped the process with a panic (also from a
// checker's read, which must never take its server down), and `nacre up`
// showed the last lines of a goroutine dump.
func TestDamagedStoreFailsReadsWithOneLine(t *testing.T) {
	if dir := os.Getenv("NACRE_KV_DAMAGED"); dir != "" {
		db, err := Open(dir, Options{MustExist: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, "open:", err)
			os.Exit(3)
		}
		it, err := db.NewIter(nil, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "iter:", err)
			os.Exit(3)
		}
		n := 0
		for it.First(); it.Valid(); it.Next() {
			n++
		}
		if err := it.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "read:", err)
			os.Exit(3)
		}
		fmt.Fprintln(os.Stderr, "read", n, "keys")
		os.Exit(0)
	}
	dir := filepath.Join(t.TempDir(), "store")
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20000 {
		if err := db.Set([]byte(fmt.Sprintf("key%08d", i)), bytes.Repeat([]byte{byte(i)}, 100), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no table file after a flush")
	}
	f, err := os.OpenFile(ssts[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(bytes.Repeat([]byte{0xaa}, 64), 1000)
	f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDamagedStoreFailsReadsWithOneLine$")
	cmd.Env = append(os.Environ(), "NACRE_KV_DAMAGED="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("child: %v\n%s", err, out)
	if err == nil {
		t.Fatal("the damaged store was read without an error")
	}
	if strings.Contains(string(out), "goroutine ") || strings.Contains(string(out), "panic") {
		t.Fatalf("a panic, not an error naming the store:\n%s", out)
	}
	if !strings.Contains(string(out), "nacre: store "+dir+": the file") || !strings.Contains(string(out), "is damaged") ||
		!strings.Contains(string(out), "Replace the replica") || !strings.Contains(string(out), "read: ") {
		t.Fatalf("the error does not name the store %s:\n%s", dir, out)
	}
}
