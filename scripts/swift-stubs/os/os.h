// <os/proc.h>: size_t os_proc_available_memory(void), iOS 13 and later.
#include <stddef.h>
size_t os_proc_available_memory(void);
