/* Wine 8 has no bcryptprimitives.dll, whose ProcessPrng Rust's standard
 * library (1.78+) calls for every random seed. This stand-in, placed
 * beside a Windows test binary only when it runs under Wine (never
 * shipped), exports ProcessPrng over RtlGenRandom (advapi32's
 * SystemFunction036), which Wine has. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
