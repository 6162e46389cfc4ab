# Mirrors csrc/tilemap.h line for line: same order, every macro, enum member, struct and function
# (tests/test_native.py checks the names and their order against the header).
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t


cdef extern from "tilemap.h" nogil:
    enum:
        TM_MAX_CLASSES
        TM_MAX_CROP
        TM_EMPTY
        TM_STACK_BASE
        TM_STACK_TOP

    ctypedef enum tm_mode:
        TM_TILES
        TM_RUNS
        TM_COLUMNS
        TM_CHUNKS

    ctypedef enum tm_status:
        TM_OK
        TM_ERR_ARG
        TM_ERR_SPEC
        TM_ERR_SCRATCH
        TM_ERR_OVERFLOW
        TM_ERR_MISMATCH

    ctypedef struct tm_spec:
        const int8_t *lut
        int32_t lut_size
        int32_t n_classes
        int32_t oob_class
        int32_t base_class
        int32_t top_class

    const char *tm_status_text(tm_status status) noexcept
    const char *tm_status_name(int status) noexcept
    tm_status tm_check_spec(const tm_spec *spec) noexcept

    int32_t tm_n_types(tm_mode mode, int32_t n_classes) noexcept
    int32_t tm_n_features(tm_mode mode, int32_t t, int32_t n_classes, int with_rel) noexcept

    tm_status tm_scratch_size(int64_t n, const int32_t *crops, int64_t *size) noexcept

    tm_status tm_count_many(int64_t n, const int32_t *grids, int32_t height, int32_t width,
                            const tm_spec *spec, tm_mode mode, int32_t chunk,
                            const int32_t *crops, int8_t *scratch, int64_t scratch_size,
                            int64_t *counts) noexcept

    tm_status tm_fill_many(int64_t n, const tm_spec *spec, tm_mode mode, int32_t chunk,
                           const int32_t *crops, const float *refs, const int8_t *scratch,
                           int64_t scratch_size, const int64_t *counts, float *const *outs,
                           const int64_t *caps, const int32_t *n_features) noexcept

    enum:
        TM_MAX_IMAGE

    void tm_count_state(const int32_t *grid, int32_t height, int32_t width, const tm_spec *spec,
                        tm_mode mode, int32_t chunk, const int32_t *crop, int8_t *cls,
                        int64_t *counts) noexcept
    tm_status tm_fill_state(const tm_spec *spec, tm_mode mode, int32_t chunk,
                            const int32_t *crop, const float *ref, const int8_t *cls,
                            const int64_t *counts, float *const *outs,
                            const int32_t *n_features) noexcept
    void tm_class_image(const int32_t *grid, int32_t height, int32_t width, const tm_spec *spec,
                        const int32_t *crop, int32_t size, uint8_t *img) noexcept
    tm_status tm_class_image_many(int64_t n, const int32_t *grids, int32_t height, int32_t width,
                                  const tm_spec *spec, const int32_t *crops, int32_t size,
                                  uint8_t *out) noexcept
