package main

import "errors"

func writeBenchHTML(path string, res *BenchResult) error {
	return errors.New("HTML report not available yet")
}
