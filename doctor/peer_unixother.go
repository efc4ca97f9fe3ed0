//go:build unix && !linux

package doctor

// ofdSetlk is zero where open-file-description locks do not exist.
const ofdSetlk = 0
