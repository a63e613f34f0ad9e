/* Captures one tensor through an installed libulpprof_capture (shared or static). */
#include <stdio.h>
#include <ulpprof/capture.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    float x[4] = {1.0f, 2.0f, -3.5f, 4.25f};
    int64_t shape[1] = {4};
    ulp_status st = ulp_capture_open(argv[1], "installed");
    if (st == ULP_OK)
        st = ulp_capture_host("x", x, ULP_DTYPE_F32, 1, shape, 0, ULP_ROLE_ACTIVATION);
    ulp_status cst = ulp_capture_close();
    if (st == ULP_OK)
        st = cst;
    printf("%s\n", ulp_status_str(st));
    return st == ULP_OK ? 0 : 1;
}
