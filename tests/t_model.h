/* t_model.h — a model of the shared reference data, loaded for a test (one CHECK: that
 * it loaded). */
#ifndef TOKD_T_MODEL_H
#define TOKD_T_MODEL_H
#include "model.h"
#include "t.h"

/* ../shared/models/FILE, or NULL (a failed CHECK) when it does not load. */
static inline tokd_model *t_load_model(const char *file) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s", t_shared(), file);
    tokd_err err;
    tokd_model *m = tokd_model_load(path, &err);
    CHECK(m != NULL, "%s: %s", path, m ? "" : err.msg);
    return m;
}
#endif
