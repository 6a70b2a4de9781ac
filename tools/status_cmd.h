/* status_cmd.h - `gradwire status` (status_cmd.c). */
#ifndef GW_TOOLS_STATUS_CMD_H
#define GW_TOOLS_STATUS_CMD_H

int gw_status_main(int argc, char **argv);

#endif
