/*
 * Keeping a short-lived helper thread off its poster's CPU.  Internal to
 * the libraries.
 *
 * A thread woken for a short job lands where the scheduler last saw it,
 * and once it has shared the poster's CPU it may stay there for every
 * later wake: the two then take turns on one core while the other idles.
 * `ulpprof diff` of 10,000 small captures wakes its helper 20 times; in
 * about one run in three the helper sat on the caller's CPU at all 20
 * (2-vCPU VM, Linux 6.18), and the comparison took 7.7 ms instead of 4.1.
 * ulp__thread_leave_cpu() moves the calling thread off such a CPU once --
 * by narrowing its affinity for the move and restoring it at once -- so
 * that later wakes start from the other CPU, and nothing stays pinned.
 */
#ifndef ULPPROF_COMMON_THREAD_CPU_H
#define ULPPROF_COMMON_THREAD_CPU_H

/* The CPU the calling thread runs on, or -1 where that cannot be known. */
int ulp__thread_cpu(void);

/*
 * When the calling thread runs on `cpu` and its affinity allows another,
 * moves it to one of those; its affinity is as before on return.  1 when
 * it moved, else 0 (not on `cpu`, `cpu` < 0, no other CPU allowed, or no
 * way to ask).
 */
int ulp__thread_leave_cpu(int cpu);

#endif /* ULPPROF_COMMON_THREAD_CPU_H */
