#include <stddef.h>
#include <stdint.h>
struct mt_object {
	uintptr_t header, slide;
	char name[256];
};
/* Fills up to max loaded objects; returns how many there are. */
size_t msgtrace_elf_objects(struct mt_object *out, size_t max);
/* Address of the ELF header of the object that holds this code. */
uintptr_t msgtrace_elf_self(void);
