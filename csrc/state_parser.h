/* Bounds-checked parser for procgen 0.10.7 get_state() bytes.
 *
 * Plain C99, no Python. A state is walked once to validate it and record where its parts are
 * (pe_measure); the caller sizes its arrays from that, then pe_fill copies what it asks for.
 * Every read is checked against the end of the buffer and done with memcpy (no field after the
 * game name is aligned). Errors carry a status, the byte offset and the field's name.
 * Format: docs/state-format.md.
 */
#ifndef PE_STATE_PARSER_H
#define PE_STATE_PARSER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PE_ENTITY_BYTES 124
#define PE_ENTITY_FIELDS 31
#define PE_MAX_TRAILER_ITEMS 48
#define PE_MAX_TRAILER_VECTORS 8
#define PE_MAX_GAME_NAME 32

/* The fixed sections between the variable parts (format reference §1-§2). */
#define PE_OPTIONS_AT 8          /* options start at 8 + name length */
#define PE_OPTIONS_BYTES 68
#define PE_STEP_BYTES 60
#define PE_BASE_BYTES 76
#define PE_CAMERA_BYTES 48       /* 9 camera fields + grid w, h, count */
#define PE_TERMINATOR ((int32_t)0xCAFECAFEu)

/* ---- the fixed records, declared once: every reader, writer and binding takes a field's name,
 * byte offset and kind from these tables (format reference §2, §2.1), never a literal. ---- */

/* One 4-byte field of a fixed record. kind: 'i' (i32) or 'f' (f32), as pe_scalar_kind says. */
typedef struct {
    const char *name;
    int32_t at;       /* byte offset within the record */
    char kind;
} pe_record_field;

/* The entity record: 31 fields of 4 bytes (PE_ENTITY_BYTES), an id per field. */
typedef enum {
    PE_F_X = 0,
    PE_F_Y = 1,
    PE_F_VX = 2,
    PE_F_VY = 3,
    PE_F_RX = 4,
    PE_F_RY = 5,
    PE_F_TYPE = 6,
    PE_F_IMAGE_TYPE = 7,
    PE_F_IMAGE_THEME = 8,
    PE_F_RENDER_Z = 9,
    PE_F_WILL_ERASE = 10,
    PE_F_COLLIDES_WITH_ENTITIES = 11,
    PE_F_COLLISION_MARGIN = 12,
    PE_F_ROTATION = 13,
    PE_F_VROT = 14,
    PE_F_IS_REFLECTED = 15,
    PE_F_FIRE_TIME = 16,
    PE_F_SPAWN_TIME = 17,
    PE_F_LIFE_TIME = 18,
    PE_F_EXPIRE_TIME = 19,
    PE_F_USE_ABS_COORDS = 20,
    PE_F_FRICTION = 21,
    PE_F_SMART_STEP = 22,
    PE_F_AVOIDS_COLLISIONS = 23,
    PE_F_AUTO_ERASE = 24,
    PE_F_ALPHA = 25,
    PE_F_HEALTH = 26,
    PE_F_THETA = 27,
    PE_F_GROW_RATE = 28,
    PE_F_ALPHA_DECAY = 29,
    PE_F_CLIMBER_SPAWN_X = 30
} pe_entity_field;

/* Indexed by pe_entity_field. procgen's C++ bools (will_erase, ...) are i32 in a state and read
 * as 'i' unchecked: a state's other values there are kept, not refused. */
static const pe_record_field PE_ENTITY_RECORD[PE_ENTITY_FIELDS] = {
    {"x", 0, 'f'},
    {"y", 4, 'f'},
    {"vx", 8, 'f'},
    {"vy", 12, 'f'},
    {"rx", 16, 'f'},
    {"ry", 20, 'f'},
    {"type", 24, 'i'},
    {"image_type", 28, 'i'},
    {"image_theme", 32, 'i'},
    {"render_z", 36, 'i'},
    {"will_erase", 40, 'i'},
    {"collides_with_entities", 44, 'i'},
    {"collision_margin", 48, 'f'},
    {"rotation", 52, 'f'},
    {"vrot", 56, 'f'},
    {"is_reflected", 60, 'i'},
    {"fire_time", 64, 'i'},
    {"spawn_time", 68, 'i'},
    {"life_time", 72, 'i'},
    {"expire_time", 76, 'i'},
    {"use_abs_coords", 80, 'i'},
    {"friction", 84, 'f'},
    {"smart_step", 88, 'i'},
    {"avoids_collisions", 92, 'i'},
    {"auto_erase", 96, 'i'},
    {"alpha", 100, 'f'},
    {"health", 104, 'f'},
    {"theta", 108, 'f'},
    {"grow_rate", 112, 'f'},
    {"alpha_decay", 116, 'f'},
    {"climber_spawn_x", 120, 'f'},
};

/* The camera section (PE_CAMERA_BYTES from main_width): 9 camera scalars, then the grid's
 * header; the grid's cells follow it. Offsets are within the section. */
typedef enum {
    PE_CAM_MAIN_WIDTH = 0,
    PE_CAM_MAIN_HEIGHT = 1,
    PE_CAM_OUT_OF_BOUNDS_OBJECT = 2,
    PE_CAM_UNIT = 3,
    PE_CAM_VIEW_DIM = 4,
    PE_CAM_X_OFF = 5,
    PE_CAM_Y_OFF = 6,
    PE_CAM_VISIBILITY = 7,
    PE_CAM_MIN_VISIBILITY = 8,
    PE_CAM_GRID_W = 9,
    PE_CAM_GRID_H = 10,
    PE_CAM_GRID_COUNT = 11
} pe_camera_field;
#define PE_CAMERA_FIELDS 12
#define PE_CAMERA_SCALARS 9      /* the fields before the grid's header: header/base scalars */

/* Indexed by pe_camera_field; the first PE_CAMERA_SCALARS are the last scalars of pe_fill. */
static const pe_record_field PE_CAMERA_RECORD[PE_CAMERA_FIELDS] = {
    {"main_width", 0, 'i'},
    {"main_height", 4, 'i'},
    {"out_of_bounds_object", 8, 'i'},
    {"unit", 12, 'f'},
    {"view_dim", 16, 'f'},
    {"x_off", 20, 'f'},
    {"y_off", 24, 'f'},
    {"visibility", 28, 'f'},
    {"min_visibility", 32, 'f'},
    {"grid.w", 36, 'i'},
    {"grid.h", 40, 'i'},
    {"grid.count", 44, 'i'},
};

typedef enum {
    PE_OK = 0,
    PE_ERR_TRUNCATED = 1,      /* a read would run past the end of the state */
    PE_ERR_VERSION = 2,        /* serialisation version is not 0 */
    PE_ERR_GAME = 3,           /* game name is not the one the batch expects */
    PE_ERR_NEGATIVE = 4,       /* a length or count is negative */
    PE_ERR_GRID = 5,           /* grid dimensions disagree with each other */
    PE_ERR_PLAYER = 6,         /* no entity, or entity 0 is not the player (type 0) */
    PE_ERR_BOOL = 7,           /* a bool field is neither 0 nor 1 */
    PE_ERR_TERMINATOR = 8,     /* 0xCAFECAFE missing where the state should end */
    PE_ERR_TRAILING = 9,       /* bytes after the terminator */
    PE_ERR_SHAPE = 10,         /* grid size differs from the batch's first state */
    PE_ERR_SPEC = 11,          /* a game spec, entity plan or observation spec is invalid (caller bug) */
    PE_ERR_INVARIANT = 12,     /* a game invariant does not hold (procgen's set_state would crash) */
    PE_ERR_VALUE = 13,         /* writer: a value does not fit its field (non-integral, too large) */
    PE_ERR_SPACE = 14,         /* writer: the output buffer is smaller than the state */
    PE_ERR_MEMORY = 15,        /* out of memory */
    PE_ERR_ARG = 16,           /* an argument is out of range (caller bug) */
    PE_ERR_LAYOUT = 17         /* a live game's container does not look valid (wrong layout) */
} pe_status;
/* Codes from here up are free for other status enums of the C core (tilemap.h's tm_status), so
 * that one code names one status everywhere. */
#define PE_STATUS_END 32

typedef struct {
    pe_status status;
    int64_t offset;     /* byte offset of the failing field within the state */
    const char *field;  /* static string naming the field */
} pe_error;

/* Trailer item kinds (the per-game fields after the grid). */
typedef enum {
    PE_T_I32 = 0,
    PE_T_F32 = 1,
    PE_T_BOOL = 2,
    PE_T_VEC_I32 = 3,
    PE_T_VEC_F32 = 4,
    PE_T_VEC_BOOL = 5,
    PE_T_VEC_ENTITY = 6
} pe_trailer_kind;

/* A value an invariant compares: a constant, a trailer scalar's value or a trailer vector's
 * length (index = trailer item), or a grid dimension. */
typedef enum {
    PE_V_CONST = 0,
    PE_V_SCALAR = 1,
    PE_V_LENGTH = 2,
    PE_V_GRID_W = 3,
    PE_V_GRID_H = 4,
    PE_V_GRID_CELLS = 5
} pe_value_kind;

typedef struct {
    int32_t kind;     /* pe_value_kind */
    int32_t index;    /* the constant, or the trailer item */
} pe_value;

/* lhs == rhs in every real state of the game (e.g. bossfight len(attack_modes) == num_rounds). */
typedef struct {
    pe_value lhs;
    pe_value rhs;
    const char *name;   /* e.g. "len(attack_modes) == num_rounds", for the error */
} pe_invariant;

#define PE_MAX_INVARIANTS 16

/* What distinguishes one game's states: its name, its trailer layout and its invariants. Owned
 * by the caller. */
typedef struct {
    const char *name;
    int32_t name_len;
    int32_t n_trailer;
    const uint8_t *trailer_kinds;        /* n_trailer pe_trailer_kind values */
    const char *const *trailer_names;    /* n_trailer names, for error messages */
    int32_t n_invariants;                /* 0 .. PE_MAX_INVARIANTS; checked unless skipped */
    const pe_invariant *invariants;
} pe_game_spec;

/* Where the parts of one validated state are. Filled by pe_measure. */
typedef struct {
    int64_t size;
    int64_t step_at;       /* reward (first field after the two header RNGs) */
    int64_t entities_at;   /* first entity record */
    int64_t base_at;       /* use_procgen_background (first field after the entities) */
    int64_t camera_at;     /* main_width (first field after asset_rand_gen) */
    int64_t grid_at;       /* first grid cell */
    int64_t trailer_at;
    int32_t name_len;
    int32_t n_entities;
    int32_t width;
    int32_t height;
    int32_t n_vectors;
    int32_t vector_counts[PE_MAX_TRAILER_VECTORS];
    int32_t n_trailer_scalars;
    /* Where each trailer item starts (a vector: its count), recorded once by pe_measure: every
     * reader of trailer items indexes this. */
    int32_t trailer_item_at[PE_MAX_TRAILER_ITEMS];
} pe_layout;

/* Room for the header and base scalars (pe_scalar_count() of them, in pe_fill's column order;
 * their names: pe_scalar_name). */
#define PE_S_N_SCALARS_MAX 64

/* Number of header/base scalars and their names (static strings). */
int pe_scalar_count(void);
const char *pe_scalar_name(int i);
/* 'i', 'f' or 'b' (i32 bool) for scalar i; 0 when out of range. */
char pe_scalar_kind(int i);
/* Where scalar i lies: its section in byte order (0 options, 1 step, 2 base, 3 camera) and its
 * byte offset within that section. PE_ERR_ARG when i is out of range. */
pe_status pe_scalar_position(int i, int *section, int *at);
/* Header/base scalar i of a measured state, as pe_fill writes it (0 when i is out of range). */
double pe_scalar_value(const uint8_t *buf, const pe_layout *layout, int i);
/* The index of the scalar named `name`, or -1 when there is none (a lookup, not an error). */
int pe_scalar_index(const char *name);
/* Human-readable text for a status. */
const char *pe_status_text(pe_status status);
/* The enum member's name of a pe_status code ("PE_ERR_TRUNCATED"), NULL for another code. */
const char *pe_status_name(int status);

/* Bytes per item of a trailer kind: 4 for scalars and scalar vectors, 124 for entity vectors. */
int64_t pe_trailer_item_bytes(uint8_t kind);

/* Validate a spec once (kinds known, vector count within limits). */
pe_status pe_check_spec(const pe_game_spec *spec);

/* Read the game name without validating the rest. On success *name points into buf. */
pe_status pe_read_game_name(const uint8_t *buf, int64_t len, const uint8_t **name,
                            int32_t *name_len, pe_error *err);

/* Walk and validate one state of game `spec` (its invariants included); record its layout. */
pe_status pe_measure(const uint8_t *buf, int64_t len, const pe_game_spec *spec,
                     pe_layout *layout, pe_error *err);

/* Value of trailer item `item` of a measured state: a scalar's value (f32 converted), or a
 * vector's length. */
double pe_trailer_item_value(const uint8_t *buf, const pe_layout *layout, const pe_game_spec *spec,
                             int32_t item);

/* The camera of a measured state: the square procgen shows is center +- view_dim / 2. */
void pe_camera(const uint8_t *buf, const pe_layout *layout, float *center_x, float *center_y,
               float *view_dim);

/* Copy from one measured state into caller-owned outputs. Any output may be NULL to skip it.
 *   scalars:          pe_scalar_count() doubles
 *   entity_fields:    n_fields indices into the 31 entity fields
 *   entities:         layout->n_entities * n_fields floats
 *   grid:             width * height int32, row-major with row 0 the bottom of the world
 *   trailer_scalars:  one double per scalar trailer item, in trailer order
 *   vector_values:    all trailer vectors' items as doubles, vector after vector
 *                     (an entity item is its 31 fields) */
void pe_fill(const uint8_t *buf, const pe_layout *layout, const pe_game_spec *spec,
             double *scalars, const int32_t *entity_fields, int32_t n_fields, float *entities,
             int32_t *grid, double *trailer_scalars, double *vector_values);

/* Number of doubles pe_fill writes to vector_values for this layout. */
int64_t pe_vector_value_count(const pe_layout *layout, const pe_game_spec *spec);

/* Batch versions. pe_measure_many stops at the first bad state: returns its status, sets
 * *bad_index and *err. It also requires every state's grid to match the first (PE_ERR_SHAPE). */
pe_status pe_measure_many(int64_t n, const uint8_t *const *bufs, const int64_t *lens,
                          const pe_game_spec *spec, pe_layout *layouts, int64_t *bad_index,
                          pe_error *err);

/* Fill many states; rows are consecutive. entity_offsets[i] / vector_offsets[i] are where state
 * i's entities (rows) / vector values (doubles) start; grid stride is width*height. */
void pe_fill_many(int64_t n, const uint8_t *const *bufs, const pe_layout *layouts,
                  const pe_game_spec *spec, double *scalars, const int32_t *entity_fields,
                  int32_t n_fields, float *entities, const int64_t *entity_offsets,
                  int32_t *grid, double *trailer_scalars, double *vector_values,
                  const int64_t *vector_offsets);

#ifdef __cplusplus
}
#endif
#endif
