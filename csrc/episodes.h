/* Episode accounting of a vectorised step, Gymnasium's way (procgen_entities/gymnasium): each
 * env's running return and length, the terminated/truncated split and the statistics of the
 * episodes that just ended, in one pass over the envs instead of a dozen array operations a
 * step in Python (about a tenth of a 64-env bigfish step).
 */
#ifndef PE_EPISODES_H
#define PE_EPISODES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One step of n envs, after the step itself. resetting[i] != 0: env i only reset this step
 * (NEXT_STEP autoreset): its reward, terminated and truncated are cleared and its episode starts
 * at return 0, length 0. Every other env adds reward[i] to returns[i] and 1 to lengths[i].
 * done[i] != 0 and truncated[i] (in/out, 0/1): the episode ended, by procgen's time limit when
 * truncated; terminated[i] (out) = done && !truncated. An env that ended gets its episode's
 * return and length in final_return[i] and final_length[i] (0 for the others) and its sums
 * restart. Returns the number of envs that ended. */
int64_t pe_episode_step(int64_t n, const uint8_t *resetting, float *reward, const uint8_t *done,
                        uint8_t *terminated, uint8_t *truncated, double *returns, int64_t *lengths,
                        float *final_return, int32_t *final_length);

#ifdef __cplusplus
}
#endif
#endif
