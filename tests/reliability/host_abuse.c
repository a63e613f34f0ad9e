/*
 * host_abuse: host programs that misuse the capture API in the ways that
 * once hung, crashed or lost captures; tests/python/test_host.py runs
 * each under a timeout and checks the file with h5py and `ulpprof ls`.
 *
 *   host_abuse close-race OUT   3 threads capture without pause; main calls
 *                               ulp_capture_close() after 300 accepted ones,
 *                               then stops and joins the threads.  Prints
 *                               "accepted N close=STATUS".
 *   host_abuse exit-race OUT    the same, but main returns while the threads
 *                               still capture (the exit handler closes).
 *                               Prints "accepted-before-exit N".
 *   host_abuse signal OUT       SIGALRM every 100 us captures from its
 *                               handler while main captures 4,000 times.
 *                               Prints "main N handler M refused R".
 *   host_abuse bad-desc OUT     bad requests between good captures: kernel
 *                               ranges [5,2) and [-1,2), a 70,000-byte /run
 *                               key and value.  Prints each status.
 *   host_abuse hold OUT N       a session with N captures, flushed; prints
 *                               "ready", waits for a line on stdin, captures
 *                               N more and closes.  Prints "close=STATUS".
 *   host_abuse open OUT         opens a session on OUT, captures one tensor,
 *                               closes; prints "open=STATUS".
 * Every capture is bf16[64] named "t"; exit 0 unless a usage error.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "ulpprof/capture.h"
#include "ulpprof/capture_device.h"

static uint16_t data[64];
static const int64_t shape[1] = {64};
static atomic_long accepted;
static atomic_int stop;

static ulp_status cap(void)
{
    return ulp_capture_host("t", data, ULP_DTYPE_BF16, 1, shape, ULP_LAYER_NONE,
                            ULP_ROLE_ACTIVATION);
}

static void *capturer(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        if (cap() == ULP_OK)
            atomic_fetch_add(&accepted, 1);
    return NULL;
}

static int race(int close_first)
{
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, capturer, NULL);
    while (atomic_load(&accepted) < 300)
        ;
    if (!close_first) {
        /* main returns; exit() runs the library's handler while they capture. */
        printf("accepted-before-exit %ld\n", atomic_load(&accepted));
        fflush(stdout);
        return 0;
    }
    ulp_status st = ulp_capture_close();
    long n = atomic_load(&accepted);
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    /* Nothing may be accepted after close returned. */
    printf("accepted %ld after-close %ld close=%d\n", n, atomic_load(&accepted) - n, (int)(st));
    return 0;
}

static atomic_long sig_ok, sig_refused;

static void on_alarm(int sig)
{
    (void)sig;
    if (cap() == ULP_OK)
        atomic_fetch_add(&sig_ok, 1);
    else
        atomic_fetch_add(&sig_refused, 1);
}

static int in_signal(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 100}, {0, 100}};
    setitimer(ITIMER_REAL, &it, NULL);
    long ok = 0;
    for (int i = 0; i < 4000; i++)
        ok += cap() == ULP_OK;
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    ulp_status st = ulp_capture_close();
    printf("main %ld handler %ld refused %ld close=%d\n", ok, atomic_load(&sig_ok),
           atomic_load(&sig_refused), (int)(st));
    return 0;
}

static int bad_desc(const char *out)
{
    ulp_session_options o;
    ulp_session_options_init(&o);
    o.path = out;
    ulp_session *s = NULL;
    if (ulp_session_open(&o, &s, NULL) != ULP_OK)
        return 2;
    ulp_capture_desc d;
    ulp_capture_desc_init(&d);
    d.name = "t";
    d.data = data;
    d.dtype = ULP_DTYPE_BF16;
    d.ndim = 1;
    d.shape = shape;
    printf("good %d\n", (int)(ulp_session_capture(s, &d)));
    ulp_capture_device_ext x;
    ulp_capture_device_ext_init(&x);
    x.has_kernels = 1;
    x.kernels[0] = 5;
    x.kernels[1] = 2;
    printf("backwards %d\n", (int)(ulp_session_capture_ext(s, &d, &x)));
    x.kernels[0] = -1;
    printf("negative %d\n", (int)(ulp_session_capture_ext(s, &d, &x)));
    char *big = malloc(70001);
    memset(big, 'k', 70000);
    big[70000] = '\0';
    printf("long-key %d\n", (int)(ulp_session_set_run(s, big, "v")));
    printf("long-value %d\n", (int)(ulp_session_set_run(s, "k", big)));
    free(big);
    printf("good %d\n", (int)(ulp_session_capture(s, &d)));
    printf("run %d\n", (int)(ulp_session_set_run(s, "cache", "miss")));
    printf("close=%d\n", (int)(ulp_session_close(s)));
    return 0;
}

static int hold(const char *out, int n)
{
    if (ulp_capture_open(out, "first") != ULP_OK)
        return 2;
    for (int i = 0; i < n; i++)
        cap();
    ulp_capture_flush();
    printf("ready\n");
    fflush(stdout);
    char line[16];
    if (fgets(line, sizeof line, stdin) == NULL)
        return 2;
    for (int i = 0; i < n; i++)
        cap();
    printf("close=%d\n", (int)(ulp_capture_close()));
    return 0;
}

static int open_one(const char *out)
{
    ulp_status st = ulp_capture_open(out, "second");
    if (st == ULP_OK) {
        cap();
        st = ulp_capture_close();
    }
    printf("open=%d\n", (int)(st));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: host_abuse MODE OUT [N]\n");
        return 2;
    }
    const char *mode = argv[1], *out = argv[2];
    for (int i = 0; i < 64; i++)
        data[i] = (uint16_t)(0x3f80 + i);
    if (strcmp(mode, "bad-desc") == 0)
        return bad_desc(out);
    if (strcmp(mode, "open") == 0)
        return open_one(out);
    if (strcmp(mode, "hold") == 0)
        return hold(out, argc > 3 ? atoi(argv[3]) : 10);
    if (ulp_capture_open(out, "abuse") != ULP_OK)
        return 2;
    if (strcmp(mode, "close-race") == 0)
        return race(1);
    if (strcmp(mode, "exit-race") == 0)
        return race(0);
    if (strcmp(mode, "signal") == 0)
        return in_signal();
    fprintf(stderr, "host_abuse: unknown mode '%s'\n", mode);
    return 2;
}
