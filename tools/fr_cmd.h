/* fr_cmd.h - `gradwire fr DIR` (fr_cmd.c). */
#ifndef GW_TOOLS_FR_CMD_H
#define GW_TOOLS_FR_CMD_H

int gw_fr_main(int argc, char **argv);

#endif
