package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestAppletsFileListsEveryApplet: make images links /bin/NAME for each line of
// applets.txt, so a name missing there is an applet the image cannot run.
func TestAppletsFileListsEveryApplet(t *testing.T) {
	raw, err := os.ReadFile("applets.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(raw)); !slices.Equal(got, Names()) {
		t.Errorf("applets.txt lists %v, the binary has %v", got, Names())
	}
}
