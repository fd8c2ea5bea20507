/* Which front end the process's caller came through (ir/status.c), for messages that tell
 * the user to set an option: the C API (the default: a session's field, or its variable),
 * the `ampc` command (its flags; tools/ampc.c sets it first thing), Python (keywords).
 * Process-wide: set once, before any other call. The options table spells an option for it
 * (passes/options.h, amp_option_say); the layers below the table ask amp_front(). */
#ifndef AMP_FRONT_H
#define AMP_FRONT_H

typedef enum AmpFront { AMP_FRONT_C = 0, AMP_FRONT_CLI = 1, AMP_FRONT_PYTHON = 2 } AmpFront;

void amp_front_set(AmpFront front);
AmpFront amp_front(void);

#endif
