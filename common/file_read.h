/*
 * file_read.h - reading and opening the files a user names (GW_JOB_TOKEN_FILE,
 * GW_TUNING_FILE, GW_DEBUG_FILE, a compressor's state file) without hanging.
 *
 * A plain open() of a FIFO blocks until someone opens the other end, and a
 * read of /dev/zero never ends: a path in a variable must not be able to
 * stop gw_comm_init. So every such file is opened O_NONBLOCK (a FIFO opens
 * at once), checked with fstat before a byte is read, and read with a bound.
 * Errors are logged once, naming the path and what is wrong with it.
 */
#ifndef GW_COMMON_FILE_READ_H
#define GW_COMMON_FILE_READ_H

#include <stddef.h>
#include <sys/stat.h>

#include "gradwire.h"
#include "log.h"

/* Do not follow a symbolic link in the last component (for secrets). */
#define GW_FILE_NOFOLLOW 0x1

/* Reads the regular file at path, at most max_bytes of it, into a fresh
 * NUL-terminated buffer (*out, freed by the caller; *len bytes before the
 * NUL; *sb its fstat, when sb is not NULL). `what` names the file in the
 * log ("GW_TUNING_FILE=/x"), logged under subsys. Anything but a regular
 * file (a FIFO, a device, a directory, a socket) and a file longer than
 * max_bytes are GW_ERR_CONFIG; a file that cannot be opened or read is
 * GW_ERR_CONFIG too, with the system's reason. Outputs are set only on
 * GW_OK. */
gw_status_t gw__file_read(const gw_logger_t *lg, const char *subsys, const char *what,
                          const char *path, size_t max_bytes, int flags, char **out, size_t *len,
                          struct stat *sb);

/* Opens path for appending log lines, creating it (mode 0666 less the
 * umask, as fopen's "a"). Never blocks: a FIFO nobody reads is refused
 * (ENXIO) at once. Accepted: a regular file, a character device (a
 * terminal, /dev/null, /dev/stderr on a terminal), and a FIFO or socket
 * somebody already reads (/dev/stderr piped to tee); refused: block
 * devices and anything else. On success *fd is a blocking descriptor, so
 * no log line is lost to EAGAIN. On failure *why holds the reason
 * (strerror's or our own), for the caller to report; nothing is logged. */
gw_status_t gw__file_open_log(const char *path, int *fd, char *why, size_t why_cap);

#endif
