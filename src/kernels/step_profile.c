/* step_profile.c — see step_profile.h. */
#include "kernels/step_profile.h"

#include <string.h>

bool tokd_profile_on;
tokd_stage tokd_profile_stage;
uint64_t tokd_profile_mark_at;
tokd_step_profile tokd_profile;

void tokd_profile_start(bool on) {
    memset(&tokd_profile, 0, sizeof tokd_profile);
    tokd_profile_stage = TOKD_STAGE_OTHER;
    tokd_profile_mark_at = 0;
    tokd_profile_on = on;
}

void tokd_profile_stop(void) { tokd_profile_on = false; }

const char *tokd_stage_name(tokd_stage s) {
    static const char *const names[TOKD_STAGE_COUNT] = {"other", "qkv", "attention", "o", "ffn_up", "ffn_down", "logits"};
    return (unsigned)s < TOKD_STAGE_COUNT ? names[s] : "?";
}
