/*
 * asan_fork.c: fork() that a sanitized test binary survives.
 *
 * Criterion runs each test case in a forked child, and the runner that
 * forks has threads of its own (nanomsg's worker, BoxFort's child pump)
 * that allocate. GCC 12's AddressSanitizer takes none of its allocator's
 * locks around fork() (newer LLVM runtimes do), so when one
 * of those threads holds a size class's lock at the fork, the child has a
 * copy of a lock that no thread of its own will ever release: its first
 * allocation from that class waits forever. CI met it in the Soft-RoCE VM
 * (test_ib_live, then test_ib_oob twice in a row), whose vCPUs are often
 * descheduled while a runner thread maps memory for a class under its lock.
 *
 * The repair is the one newer runtimes make: take the thread registry, the
 * allocator and the stack depot before fork() and release them after it,
 * in both processes, so that a child always starts with them free. Those
 * functions are internal to libasan.so.8 (not exported), so they are looked
 * up by name in its symbol table (Debian ships it unstripped); where they
 * cannot be found, nothing is registered and fork() is as before.
 *
 * Compiled into every Criterion test binary; does nothing without ASan.
 */
#if defined(__SANITIZE_ADDRESS__)

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dl_iterate_phdr */
#endif
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef void (*asan_lock_fn)(void);

/* The runtime's own names, locked in this order and released in reverse
 * (the order of newer compiler-rt runtimes). */
enum { REGISTRY, ALLOCATOR, DEPOT, N_LOCKS };
static const char *const lock_names[N_LOCKS] = {
    "_ZN6__lsan18LockThreadRegistryEv",
    "_ZN6__lsan13LockAllocatorEv",
    "_ZN11__sanitizer17StackDepotLockAllEv",
};
static const char *const unlock_names[N_LOCKS] = {
    "_ZN6__lsan20UnlockThreadRegistryEv",
    "_ZN6__lsan15UnlockAllocatorEv",
    "_ZN11__sanitizer19StackDepotUnlockAllEv",
};

/* Set once, by asan_fork_install, before any thread of the test exists. */
static asan_lock_fn lock_fns[N_LOCKS];
static asan_lock_fn unlock_fns[N_LOCKS];

struct runtime_at {
    char path[4096];
    uintptr_t base;
};

static int find_runtime(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct runtime_at *at = arg;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "/libasan.so"))
        return 0;
    if (strlen(info->dlpi_name) >= sizeof at->path)
        return 0;
    strcpy(at->path, info->dlpi_name);
    at->base = info->dlpi_addr;
    return 1;
}

/* Resolves every name of both tables from the file's .symtab; 0 when all
 * were found. The file is read through a private mapping, bounds-checked. */
static int resolve(const struct runtime_at *at)
{
    int fd = open(at->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    int rc = -1;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(Elf64_Ehdr)) {
        close(fd);
        return -1;
    }
    size_t len = (size_t)st.st_size;
    const uint8_t *file = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (file == MAP_FAILED)
        return -1;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)file;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > len ||
        (len - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
        goto out;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(file + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum)
            continue;
        const Elf64_Shdr *strs = &sh[sh[i].sh_link];
        if (sh[i].sh_offset > len || sh[i].sh_size > len - sh[i].sh_offset ||
            strs->sh_offset > len || strs->sh_size > len - strs->sh_offset)
            goto out;
        const Elf64_Sym *sym = (const Elf64_Sym *)(file + sh[i].sh_offset);
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        const char *names = (const char *)(file + strs->sh_offset);
        for (size_t k = 0; k < n; k++) {
            if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC || sym[k].st_name >= strs->sh_size)
                continue;
            const char *name = names + sym[k].st_name;
            if (!memchr(name, '\0', strs->sh_size - sym[k].st_name))
                continue;
            for (int l = 0; l < N_LOCKS; l++) {
                if (strcmp(name, lock_names[l]) == 0)
                    lock_fns[l] = (asan_lock_fn)(at->base + sym[k].st_value);
                if (strcmp(name, unlock_names[l]) == 0)
                    unlock_fns[l] = (asan_lock_fn)(at->base + sym[k].st_value);
            }
        }
    }
    rc = 0;
    for (int l = 0; l < N_LOCKS; l++)
        if (!lock_fns[l] || !unlock_fns[l])
            rc = -1;
out:
    munmap((void *)file, len);
    return rc;
}

/* For test_asan_fork: 1 when the handlers are registered. */
int gw_test_asan_fork_guarded(void);
static int guarded;
int gw_test_asan_fork_guarded(void) { return guarded; }

static void before_fork(void)
{
    for (int l = 0; l < N_LOCKS; l++)
        lock_fns[l]();
}

static void after_fork(void)
{
    for (int l = N_LOCKS - 1; l >= 0; l--)
        unlock_fns[l]();
}

/* Registered first of all, from the executable's .preinit_array, which
 * runs after ASan's own initialisation and before any library's
 * constructor: prepare handlers run in the reverse order of registration,
 * so every other one (OpenBLAS's joins its threads, BoxFort's takes its
 * sandbox locks) runs before this one, while the allocator is free, and
 * these locks are the last taken before fork() and the first released
 * after it. Registered from a constructor instead, after OpenBLAS's (a
 * library's constructors run before the executable's), this handler ran
 * first and OpenBLAS's then waited forever to join a thread that was
 * exiting, and needed the thread registry this one held (CI's sanitized
 * test_mlp and test_train_async). */
static void asan_fork_install(void)
{
    struct runtime_at at = {0};
    if (dl_iterate_phdr(find_runtime, &at) == 0 || resolve(&at) != 0)
        return;
    guarded = pthread_atfork(before_fork, after_fork, after_fork) == 0;
}

__attribute__((section(".preinit_array"),
               used)) static void (*const asan_fork_preinit)(void) = asan_fork_install;

#endif
