from procgen_entities.state_parser cimport pe_error, pe_game_spec, pe_invariant, pe_status


cdef class GameSpec:
    cdef pe_game_spec spec
    cdef bytes _name
    cdef bytes _kinds
    cdef list _names
    cdef const char **_name_ptrs
    cdef pe_invariant *_invariants
    cdef list _invariant_names
    cdef readonly str game
    cdef readonly int n_trailer_scalars
    cdef readonly int n_trailer_vectors


cdef int raise_status(pe_status status, const pe_error *err, Py_ssize_t index) except -1
