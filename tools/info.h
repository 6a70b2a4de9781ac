/*
 * info.h - `gradwire info`: what gradwire would use on this node and why
 * (tools/info.c).
 */
#ifndef GW_TOOLS_INFO_H
#define GW_TOOLS_INFO_H

/* argv[0] is "info"; returns the exit status. */
int gw_info_main(int argc, char **argv);

/* The registry views (tools/info_env.c): mode is "--env" (or "-c"),
 * "--env-markdown" or "--errors-markdown"; returns the exit status. */
int gw_info_env_main(const char *mode);

#endif
