/* CUPTI callbacks for the graph taps (cuda_graphcb.h). */
#include <stdint.h>

#include "cuda_graphcb.h"

const CUpti_CallbackId ulp__graphcb_driver_ids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};
const size_t ulp__graphcb_driver_count =
    sizeof(ulp__graphcb_driver_ids) / sizeof(ulp__graphcb_driver_ids[0]);

const CUpti_CallbackId ulp__graphcb_resource_ids[] = {
    CUPTI_CBID_RESOURCE_GRAPH_CLONED,
    CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING,
    CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED,
    CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
};
const size_t ulp__graphcb_resource_count =
    sizeof(ulp__graphcb_resource_ids) / sizeof(ulp__graphcb_resource_ids[0]);

/* The id of the capture a cuStreamEndCapture on this thread ends, taken at
 * entry (at exit the stream no longer captures). */
static __thread int t_end_valid;
static __thread cuuint64_t t_end_id;

static int resource(ulp__graphcap *g, CUpti_CallbackId cbid, const CUpti_ResourceData *rd)
{
    const CUpti_GraphData *gd = rd->resourceDescriptor;
    if (gd == NULL)
        return 0;
    switch (cbid) {
    case CUPTI_CBID_RESOURCE_GRAPH_CLONED:
        ulp__graphcap_graph_cloned(g, gd->originalGraph, gd->graph);
        return 1;
    case CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING:
        ulp__graphcap_graph_destroyed(g, gd->graph);
        return 1;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED:
        ulp__graphcap_exec_created(g, gd->graph, gd->graphExec);
        return 1;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING:
        ulp__graphcap_exec_destroyed(g, gd->graphExec);
        return 1;
    default:
        return 0;
    }
}

static void end_capture(ulp__devcap *dc, ulp__graphcap *g, const CUpti_CallbackData *cb)
{
    const cuStreamEndCapture_params *p = cb->functionParams;
    if (cb->callbackSite == CUPTI_API_ENTER) {
        CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
        t_end_valid = ulp__devcap_ops(dc)->stream_get_capture_info(
                          p->hStream, &cs, &t_end_id, NULL, NULL, NULL, NULL) == CUDA_SUCCESS &&
                      cs != CU_STREAM_CAPTURE_STATUS_NONE;
        return;
    }
    if (!t_end_valid)
        return;
    t_end_valid = 0;
    int ok = *(const CUresult *)cb->functionReturnValue == CUDA_SUCCESS && p->phGraph != NULL;
    ulp__graphcap_capture_ended(g, t_end_id, ok ? *p->phGraph : NULL);
}

int ulp__graphcb_handle(ulp__devcap *dc, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                        const void *cbdata)
{
    ulp__graphcap *g = dc != NULL ? ulp__devcap_graphcap(dc) : NULL;
    if (g == NULL || cbdata == NULL)
        return 0;
    if (domain == CUPTI_CB_DOMAIN_RESOURCE)
        return resource(g, cbid, cbdata);
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API)
        return 0;
    const CUpti_CallbackData *cb = cbdata;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz:
        end_capture(dc, g, cb);
        return 1;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: {
        const cuGraphLaunch_params *p = cb->functionParams;
        if (cb->callbackSite == CUPTI_API_ENTER)
            ulp__devcap_graph_launching(dc, p->hGraph);
        else if (*(const CUresult *)cb->functionReturnValue == CUDA_SUCCESS)
            ulp__devcap_graph_launched(dc, p->hGraph, p->hStream, cb->correlationId);
        return 1;
    }
    default:
        return 0;
    }
}
