/* check_hdf5.c: HDF5's half of the checked calls: quiet the library, describe its error stack. */
#include "config.h"

#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#include "util/check.h"

void dt_check_hdf5_init(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

struct walk {
    char func[64];   /* the API function */
    char outer[256]; /* its description */
    char inner[512]; /* the most specific description */
    int n;
};

static herr_t walk_cb(unsigned n, const H5E_error2_t *err, void *data)
{
    struct walk *w = data;
    const char *d = err->desc ? err->desc : "";
    if (n == 0) {
        snprintf(w->func, sizeof w->func, "%s", err->func_name ? err->func_name : "?");
        snprintf(w->outer, sizeof w->outer, "%s", d);
    }
    snprintf(w->inner, sizeof w->inner, "%s", d);
    w->n++;
    return 0;
}

/* The POSIX driver's I/O failures describe themselves over two lines with a time, addresses and
 * sizes ("file write failed: time = ...\n, filename = ..., errno = 28, error message = 'No space
 * left on device', ..."): keep what a reader acts on, "file write failed: No space left on device",
 * and never a line break. */
static void shorten_io(char *d, size_t n)
{
    const char *key = "error message = '";
    char *m = strstr(d, key), *colon = strchr(d, ':');
    if (m && colon && colon < m) {
        char msg[256];
        m += strlen(key);
        size_t len = strcspn(m, "'");
        snprintf(msg, sizeof msg, "%.*s", (int)(len < sizeof msg ? len : sizeof msg - 1), m);
        size_t head = (size_t)(colon - d);
        snprintf(d + head, n - head, ": %s", msg);
    }
    for (char *p = d; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

static _Thread_local char hdf5_buf[1024]; /* room for func + outer + inner */

const char *dt_errstr_hdf5(long long rc, int saved_errno)
{
    (void)rc;
    (void)saved_errno;
    struct walk w = {.n = 0};
    hid_t stack = H5Eget_current_stack(); /* takes the stack and clears it for the next call */
    int walked = stack >= 0 && H5Ewalk2(stack, H5E_WALK_DOWNWARD, walk_cb, &w) >= 0 && w.n > 0;
    if (walked)
        shorten_io(w.inner, sizeof w.inner);
    if (!walked)
        snprintf(hdf5_buf, sizeof hdf5_buf, "no HDF5 error stack");
    else if (strncmp(w.inner, w.outer, strlen(w.outer)) == 0) /* the inner one says it all */
        snprintf(hdf5_buf, sizeof hdf5_buf, "%s(): %s", w.func, w.inner);
    else
        snprintf(hdf5_buf, sizeof hdf5_buf, "%s(): %s: %s", w.func, w.outer, w.inner);
    if (stack >= 0)
        H5Eclose_stack(stack);
    return hdf5_buf;
}
