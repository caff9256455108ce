package main

import (
	"io"
	"log"
)

func discard() *log.Logger { return log.New(io.Discard, "", 0) }
