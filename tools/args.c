/*
 * The helpers behind tools/args.h, for drld: drld/meson.build lists this
 * one file of tools/, so it compiles the tools/common/ files drld needs
 * into one object. The drl tool builds tools/common/ itself and does not
 * link this file (tools/meson.build).
 */
#include "common/args.c"
#include "common/json.c"
#include "common/result.c"
