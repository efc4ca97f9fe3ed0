package testenv

import "golang.org/x/sys/windows"

// underWine reports whether this Windows process runs under wine: wine's
// ntdll exports wine_get_version, Windows' does not.
func underWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}
