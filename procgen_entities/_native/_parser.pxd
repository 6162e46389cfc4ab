from procgen_entities._native.state_parser cimport pe_game_spec, pe_invariant


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
