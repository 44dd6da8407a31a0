package main

import "io"

func runCheck(args []string, stdout, stderr io.Writer) error { return nil }
