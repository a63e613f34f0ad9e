/* SHA-256 (FIPS 180-4) of a byte string, for the contract's numerical_policy digest. */
#ifndef ULPPROF_CONTRACT_SHA256_H
#define ULPPROF_CONTRACT_SHA256_H

#include <stddef.h>

/* Writes the 64 lowercase hex digits of SHA-256(data[0..len)) and a NUL to `hex`. */
void ulp__sha256_hex(const void *data, size_t len, char hex[65]);

#endif /* ULPPROF_CONTRACT_SHA256_H */
