from procgen_entities._native.state_parser cimport pe_error


cdef int check_status(int status, const pe_error *err=*, Py_ssize_t index=*) except -1
