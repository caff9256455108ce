//go:build !race

package fencedlease

const raceDetector = false
