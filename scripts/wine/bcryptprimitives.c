/*
 * bcryptprimitives.dll for wine 8, used only by scripts/wine-test.
 *
 * Go 1.21.13 and later call bcryptprimitives!ProcessPrng at start-up for
 * the runtime's random numbers; wine 8 does not ship that DLL, so a Go
 * windows/amd64 binary dies with "bcryptprimitives.dll not found" before
 * main. This DLL exports ProcessPrng and fills the buffer with
 * advapi32!SystemFunction036 (RtlGenRandom), which wine does implement.
 * ProcessPrng is documented to always succeed and return TRUE.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
	/* RtlGenRandom takes a ULONG: fill large requests in pieces. */
	while (length > 0) {
		ULONG n = length > 0x40000000 ? 0x40000000 : (ULONG)length;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		length -= n;
	}
	return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
	(void)instance;
	(void)reason;
	(void)reserved;
	return TRUE;
}
