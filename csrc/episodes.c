#include "episodes.h"

int64_t pe_episode_step(int64_t n, const uint8_t *resetting, float *reward, const uint8_t *done,
                        uint8_t *terminated, uint8_t *truncated, double *returns, int64_t *lengths,
                        float *final_return, int32_t *final_length) {
    int64_t ended = 0;
    for (int64_t i = 0; i < n; i++) {
        final_return[i] = 0.0f;
        final_length[i] = 0;
        if (resetting[i]) {  /* the step was the reset: the new episode has no step yet */
            reward[i] = 0.0f;
            terminated[i] = truncated[i] = 0;
            returns[i] = 0.0;
            lengths[i] = 0;
            continue;
        }
        returns[i] += reward[i];
        lengths[i] += 1;
        truncated[i] = truncated[i] != 0;
        terminated[i] = done[i] != 0 && !truncated[i];
        if (!terminated[i] && !truncated[i]) continue;
        ended++;
        final_return[i] = (float)returns[i];
        final_length[i] = (int32_t)lengths[i];
        returns[i] = 0.0;
        lengths[i] = 0;
    }
    return ended;
}
