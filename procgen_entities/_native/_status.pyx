# cython: language_level=3
"""C statuses to exceptions, in one place for every extension of the package.

Every status code of the C core names one member of pe_status (csrc/state_parser.h) or tm_status
(csrc/tilemap.h, whose error codes start at PE_STATUS_END); the C sources export the members'
names (pe_status_name, tm_status_name) and errors.EXCEPTION_OF_STATUS maps each name to its one
exception class.
"""
from procgen_entities._native.state_parser cimport (PE_OK, PE_STATUS_END, pe_error,
                                                    pe_status, pe_status_name, pe_status_text)
from procgen_entities._native.tilemap cimport tm_status, tm_status_name, tm_status_text

from procgen_entities.errors import error_from_status

#: The first code past pe_status's range; tm_status's error codes start here.
STATUS_END = PE_STATUS_END


def status_name(int status):
    """The C enum member's name of a status code, or None for a code no enum has."""
    cdef const char *name = pe_status_name(status)
    if name == NULL:
        name = tm_status_name(status)
    return None if name == NULL else name.decode()


def status_text(int status):
    """The C core's text for a status code."""
    if pe_status_name(status) != NULL:
        return pe_status_text(<pe_status>status).decode()
    return "tilemap kernel: " + tm_status_text(<tm_status>status).decode()


cdef int check_status(int status, const pe_error *err=NULL, Py_ssize_t index=0) except -1:
    """Return 0 for PE_OK / TM_OK, else raise the status's exception: state `index` of the call,
    the failing field and its byte offset from `err` when the entry reports them."""
    if status == PE_OK:
        return 0
    name = status_name(status)
    field = err.field.decode() if err != NULL and err.field != NULL else ""
    offset = err.offset if err != NULL else 0
    raise error_from_status(name or f"unknown status {status}", status, status_text(status),
                            index, offset, field)
