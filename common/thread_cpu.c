/* Moving a helper thread off its poster's CPU (thread_cpu.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getcpu, sched_[gs]etaffinity, CPU_* */
#endif
#include "thread_cpu.h"

#ifdef __linux__
#include <sched.h>

int ulp__thread_cpu(void)
{
    return sched_getcpu();
}

int ulp__thread_leave_cpu(int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getcpu() != cpu)
        return 0;
    cpu_set_t was, other;
    if (sched_getaffinity(0, sizeof was, &was) != 0 || !CPU_ISSET(cpu, &was))
        return 0;
    other = was;
    CPU_CLR(cpu, &other);
    if (CPU_COUNT(&other) == 0 || sched_setaffinity(0, sizeof other, &other) != 0)
        return 0;
    /* The thread runs elsewhere once the call returns; widening the mask
     * again does not move it back.  (A mask it had cannot be refused; were
     * it, the thread would only be kept off one CPU.) */
    (void)sched_setaffinity(0, sizeof was, &was);
    return 1;
}
#else
int ulp__thread_cpu(void)
{
    return -1;
}

int ulp__thread_leave_cpu(int cpu)
{
    (void)cpu;
    return 0;
}
#endif
