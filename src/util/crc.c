/* crc.c: reflected table-driven CRC-32s (contract in crc.h). */
#include "config.h"

#include "util/crc.h"

#include <pthread.h>

static uint32_t table_zlib[256], table_c[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(uint32_t *t, uint32_t poly)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (poly & (0u - (c & 1u)));
        t[i] = c;
    }
}

static void build_both(void)
{
    build(table_zlib, 0xEDB88320u);
    build(table_c, 0x82F63B78u);
}

/* the register is pre- and post-inverted, as both standards define */
static uint32_t run(const uint32_t *t, uint32_t crc, const void *data, size_t n)
{
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = t[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

uint32_t dt_crc32(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&once, build_both);
    return run(table_zlib, crc, data, n);
}

uint32_t dt_crc32c(const void *data, size_t n)
{
    pthread_once(&once, build_both);
    return run(table_c, 0, data, n);
}
