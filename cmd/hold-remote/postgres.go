package main

import "github.com/hold-dev/hold/internal/pgcli"

func init() {
	pgcli.Register()
}
