// The emulated Metal device's runtime: a dispatch runs its threadgroups one after another in
// an order shuffled by a seed, each threadgroup's threads as fibers (one stack each, switched
// by hand-written assembly: a switch costs a few nanoseconds), also scheduled in a seeded
// random order between meeting points. A fiber runs until it reaches a meeting point (a
// barrier or a SIMD-group function) or returns; a meeting point opens when every thread that
// must take part is there, and an impossible one (a barrier some threads never reach, lanes of
// a SIMD-group at different meeting points) ends the dispatch with a divergence error instead
// of a hang. See metal_stdlib for what the kernels see, and README.md.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "metal_stdlib"

using namespace metal::emu;

// ---- fibers --------------------------------------------------------------------------------

extern "C" void mtlemu_switch(void **save_sp, void *load_sp);
extern "C" void mtlemu_fiber_start();

#if defined(__APPLE__)
#define MTLEMU_SYM(x) "_" #x
#else
#define MTLEMU_SYM(x) #x
#endif

#if defined(__x86_64__)
// callee-saved rbp, rbx, r12-r15, MXCSR and the x87 control word; a new fiber starts in
// mtlemu_fiber_start with its function in r13 and its argument in r12
asm(R"(
.text
.globl )" MTLEMU_SYM(mtlemu_switch) R"(
)" MTLEMU_SYM(mtlemu_switch) R"(:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.globl )" MTLEMU_SYM(mtlemu_fiber_start) R"(
)" MTLEMU_SYM(mtlemu_fiber_start) R"(:
    movq %r12, %rdi
    callq *%r13
    ud2
)");
#elif defined(__aarch64__)
// callee-saved x19-x30 and d8-d15; a new fiber starts in mtlemu_fiber_start with its function
// in x20 and its argument in x19
asm(R"(
.text
.globl )" MTLEMU_SYM(mtlemu_switch) R"(
.p2align 2
)" MTLEMU_SYM(mtlemu_switch) R"(:
    sub sp, sp, #160
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mov x2, sp
    str x2, [x0]
    mov sp, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    add sp, sp, #160
    ret
.globl )" MTLEMU_SYM(mtlemu_fiber_start) R"(
.p2align 2
)" MTLEMU_SYM(mtlemu_fiber_start) R"(:
    mov x0, x19
    blr x20
    brk #0
)");
#else
#error "the emulated Metal device switches fibers on x86_64 and aarch64 only"
#endif

namespace {

constexpr size_t STACK = 128 * 1024;
constexpr size_t THREADGROUP_LIMIT = 32 * 1024;
constexpr uint32_t MAX_THREADS = 1024;

// Why a dispatch stopped: thrown out of the scheduler (never across a fiber's frames: a
// failing fiber records the message and switches back for good).
struct Failure {
    std::string message;
};

enum class Wait { running, simd, barrier, done };

struct Group;

struct Lane {
    void *sp = nullptr;
    char *stack = nullptr;
    Group *group = nullptr;
    uint32_t index = 0;  // in the threadgroup
    Wait wait = Wait::running;
    const char *what = nullptr;
    int line = 0;
    uint32_t simd_generation = 0;  // meetings of its SIMD-group it has taken part in
    uint32_t tg_variables = 0;     // threadgroup variables it has declared
    Call call{};
};

struct Variable {
    std::unique_ptr<unsigned char[]> storage;
    size_t size;
    const char *type;
};

// One SIMD-group's meeting point, double-buffered by generation: a lane may run one meeting
// ahead of the others (it cannot open the next before they all arrive at it, so after they
// read this one).
struct Meeting {
    alignas(16) unsigned char values[32][16];
    uint32_t mask;
};

struct Group {
    std::vector<Lane> *lanes;
    uint32_t threads;
    std::vector<Variable> variables;
    size_t variable_bytes = 0;
    size_t dynamic_bytes = 0;
    Meeting meetings[32][2];  // per SIMD-group, per generation parity
    std::vector<uint32_t> runnable;
    uint32_t done = 0;
    const char *kernel_name;
    void (*entry)(const Call &);
    std::string failure;
};

thread_local Lane *current = nullptr;
thread_local void *scheduler_sp = nullptr;

struct Rng {
    uint64_t s;
    uint64_t next() {
        s += 0x9E3779B97F4A7C15ull;
        uint64_t z = s;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    uint32_t below(uint32_t n) { return uint32_t(next() % n); }
};

void yield_to_scheduler() {
    Lane *me = current;
    mtlemu_switch(&me->sp, scheduler_sp);
}

void fiber_main(Lane *lane) {
    lane->group->entry(lane->call);
    lane->wait = Wait::done;
    yield_to_scheduler();
    __builtin_trap();
}

void prepare(Lane &lane) {
    // the frame mtlemu_switch pops: registers, then the return into mtlemu_fiber_start
    uintptr_t top = (reinterpret_cast<uintptr_t>(lane.stack) + STACK) & ~uintptr_t(15);
#if defined(__x86_64__)
    uint64_t *sp = reinterpret_cast<uint64_t *>(top - 64 - 16);
    sp[0] = 0x1F80 | (uint64_t(0x037F) << 32);  // MXCSR, x87 control word
    sp[1] = 0;                                  // r15
    sp[2] = 0;                                  // r14
    sp[3] = reinterpret_cast<uint64_t>(&fiber_main);  // r13
    sp[4] = reinterpret_cast<uint64_t>(&lane);        // r12
    sp[5] = 0;                                        // rbx
    sp[6] = 0;                                        // rbp
    sp[7] = reinterpret_cast<uint64_t>(&mtlemu_fiber_start);
#else
    uint64_t *sp = reinterpret_cast<uint64_t *>(top - 160);
    std::memset(sp, 0, 160);
    sp[0] = reinterpret_cast<uint64_t>(&lane);        // x19
    sp[1] = reinterpret_cast<uint64_t>(&fiber_main);  // x20
    sp[11] = reinterpret_cast<uint64_t>(&mtlemu_fiber_start);  // x30
#endif
    lane.sp = sp;
}

std::string describe(const Lane &l) {
    switch (l.wait) {
    case Wait::done: return "returned";
    case Wait::running: return "running";
    default: return std::string("at ") + l.what + ", line " + std::to_string(l.line);
    }
}

// Lanes [first, last) grouped by where they are, for a message: "lanes 0-3, 7 at ..., ...".
std::string where_lanes(const std::vector<Lane> &lanes, uint32_t first, uint32_t last) {
    std::vector<std::pair<std::string, std::vector<uint32_t>>> places;
    for (uint32_t i = first; i < last; ++i) {
        const std::string d = describe(lanes[i]);
        bool found = false;
        for (auto &p : places)
            if (p.first == d) {
                p.second.push_back(i);
                found = true;
            }
        if (!found) places.push_back({d, {i}});
    }
    std::string out;
    for (auto &p : places) {
        if (!out.empty()) out += "; ";
        out += p.second.size() == 1 ? "thread " : "threads ";
        for (size_t k = 0; k < p.second.size(); ++k) {
            size_t j = k;
            while (j + 1 < p.second.size() && p.second[j + 1] == p.second[j] + 1) ++j;
            if (k) out += ",";
            out += std::to_string(p.second[k]);
            if (j > k) out += "-" + std::to_string(p.second[j]);
            k = j;
        }
        out += " " + p.first;
    }
    return out;
}

[[noreturn]] void diverge(Group &g, const std::string &why) {
    throw Failure{std::string("divergence in kernel ") + g.kernel_name + ": " + why};
}

// After lane `l` stopped (at a meeting point or returned): open what can open.
void settle(Group &g, uint32_t l) {
    std::vector<Lane> &lanes = *g.lanes;
    const uint32_t sg = l / 32, first = sg * 32, last = std::min(g.threads, first + 32);
    // the SIMD-group: every lane that has not returned at one SIMD meeting point
    bool all_stopped = true, any_simd = false, any_barrier = false, same = true;
    const Lane *ref = nullptr;
    for (uint32_t i = first; i < last; ++i) {
        const Lane &x = lanes[i];
        if (x.wait == Wait::running) all_stopped = false;
        if (x.wait == Wait::simd) {
            any_simd = true;
            if (!ref) ref = &x;
            else if (x.line != ref->line || std::strcmp(x.what, ref->what) != 0) same = false;
        }
        if (x.wait == Wait::barrier) any_barrier = true;
    }
    if (all_stopped && any_simd) {
        if (any_barrier || !same)
            diverge(g, "SIMD-group " + std::to_string(sg) + " is not at one meeting point: " +
                           where_lanes(lanes, first, last));
        Meeting &m = g.meetings[sg][ref->simd_generation & 1];
        m.mask = 0;
        for (uint32_t i = first; i < last; ++i)
            if (lanes[i].wait == Wait::simd) {
                if (lanes[i].simd_generation != ref->simd_generation)
                    diverge(g, "SIMD-group " + std::to_string(sg) + " lanes out of step at " +
                                   ref->what);
                m.mask |= 1u << (i - first);
            }
        for (uint32_t i = first; i < last; ++i)
            if (lanes[i].wait == Wait::simd) {
                lanes[i].wait = Wait::running;
                g.runnable.push_back(i);
            }
        return;
    }
    // the threadgroup: every thread at one barrier
    uint32_t at_barrier = 0, returned = 0;
    for (uint32_t i = 0; i < g.threads; ++i) {
        if (lanes[i].wait == Wait::barrier) ++at_barrier;
        else if (lanes[i].wait == Wait::done) ++returned;
        else return;  // someone still runs or waits for its SIMD-group
    }
    if (at_barrier == 0) return;  // all returned
    const Lane *b = nullptr;
    for (uint32_t i = 0; i < g.threads; ++i)
        if (lanes[i].wait == Wait::barrier) {
            if (!b) b = &lanes[i];
            else if (lanes[i].line != b->line || std::strcmp(lanes[i].what, b->what) != 0)
                diverge(g, "threads at different barriers: " + where_lanes(lanes, 0, g.threads));
        }
    if (returned)
        diverge(g, std::string(b->what) + " at line " + std::to_string(b->line) + " reached by " +
                       std::to_string(at_barrier) + " of " + std::to_string(g.threads) +
                       " threads (the others returned): " + where_lanes(lanes, 0, g.threads));
    for (uint32_t i = 0; i < g.threads; ++i) {
        lanes[i].wait = Wait::running;
        g.runnable.push_back(i);
    }
}

void run_group(Group &g, Rng &rng) {
    std::vector<Lane> &lanes = *g.lanes;
    g.runnable.clear();
    for (uint32_t i = 0; i < g.threads; ++i) g.runnable.push_back(i);
    g.done = 0;
    while (!g.runnable.empty()) {
        const uint32_t k = rng.below(uint32_t(g.runnable.size()));
        const uint32_t l = g.runnable[k];
        g.runnable[k] = g.runnable.back();
        g.runnable.pop_back();
        current = &lanes[l];
        mtlemu_switch(&scheduler_sp, lanes[l].sp);
        current = nullptr;
        if (!g.failure.empty()) throw Failure{g.failure};
        settle(g, l);
    }
    for (uint32_t i = 0; i < g.threads; ++i)
        if (lanes[i].wait != Wait::done)
            diverge(g, "no thread can go on: " + where_lanes(lanes, 0, g.threads));
}

struct Device {
    std::vector<Lane> lanes;
    std::vector<std::unique_ptr<char[]>> stacks;
    Device() {
        lanes.resize(MAX_THREADS);
        for (uint32_t i = 0; i < MAX_THREADS; ++i) {
            stacks.emplace_back(new char[STACK]);
            lanes[i].stack = stacks.back().get();
        }
    }
};

} // namespace

// ---- what the kernels call -----------------------------------------------------------------

namespace metal {
namespace emu {

void fail(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!current) throw Failure{buf};
    // unwinding through a fiber's frames is not possible: record, leave the fiber for good
    current->group->failure = buf;
    current->wait = Wait::done;
    yield_to_scheduler();
    __builtin_trap();
}

uint32_t lane_index() { return current->index % 32; }

void *threadgroup_variable(size_t size, size_t align, const char *type) {
    Lane *me = current;
    Group &g = *me->group;
    const uint32_t k = me->tg_variables++;
    if (k == g.variables.size()) {
        g.variable_bytes = (g.variable_bytes + align - 1) / align * align + size;
        if (g.variable_bytes + g.dynamic_bytes > THREADGROUP_LIMIT)
            fail("kernel %s: %zu bytes of threadgroup variables and %zu set by the host are more "
                 "than the %zu a threadgroup has",
                 g.kernel_name, g.variable_bytes, g.dynamic_bytes, THREADGROUP_LIMIT);
        Variable v{std::unique_ptr<unsigned char[]>(new unsigned char[size + align]), size, type};
        std::memset(v.storage.get(), 0xFF, size + align);
        g.variables.push_back(std::move(v));
    } else if (k > g.variables.size() || g.variables[k].size != size) {
        fail("kernel %s: thread %u declares threadgroup variable %u as %s, another thread as %s",
             g.kernel_name, me->index, k, type, g.variables[k].type);
    }
    uintptr_t p = reinterpret_cast<uintptr_t>(g.variables[k].storage.get());
    return reinterpret_cast<void *>((p + align - 1) / align * align);
}

const unsigned char *simd_meet(const void *value, size_t size, const char *what, int line, uint32_t *mask) {
    Lane *me = current;
    Group &g = *me->group;
    Meeting &m = g.meetings[me->index / 32][me->simd_generation & 1];
    std::memcpy(m.values[me->index % 32], value, size);
    me->wait = Wait::simd;
    me->what = what;
    me->line = line;
    yield_to_scheduler();
    me->simd_generation++;
    *mask = m.mask;
    return &m.values[0][0];
}

void threadgroup_meet(const char *what, int line) {
    Lane *me = current;
    me->wait = Wait::barrier;
    me->what = what;
    me->line = line;
    yield_to_scheduler();
}

} // namespace emu
} // namespace metal

// ---- the C interface the engine calls (engine/src/backend/metal_emulated) ----------------


struct MtlemuBinding {
    const void *address;
    size_t length;  // bytes from `address` to the end of its buffer
    uint8_t bound;
};

extern "C" int mtlemu_has_kernel(const char *name) {
    for (const KernelEntry *k = mtlemu_kernels; k->name; ++k)
        if (std::strcmp(k->name, name) == 0) return 1;
    return 0;
}

extern "C" uint32_t mtlemu_max_threads() { return MAX_THREADS; }

// One dispatch: `grid` threadgroups of `threads` threads; 31 buffer bindings and 31 threadgroup
// memory lengths. Returns 0, or 1 with the reason in `error`.
extern "C" int mtlemu_dispatch(const char *name, const MtlemuBinding *bindings,
                               const size_t *threadgroup_lengths, const uint32_t grid[3],
                               const uint32_t threads[3], uint64_t seed, char *error,
                               size_t error_len) {
    static thread_local std::unique_ptr<Device> dev;
    try {
        const KernelEntry *k = mtlemu_kernels;
        while (k->name && std::strcmp(k->name, name) != 0) ++k;
        if (!k->name) throw Failure{std::string("no kernel named ") + name};
        const uint64_t per = uint64_t(threads[0]) * threads[1] * threads[2];
        if (per == 0 || per > MAX_THREADS)
            throw Failure{std::string("kernel ") + name + ": " + std::to_string(per) +
                          " threads per threadgroup (1 to 1024)"};
        if (!dev) dev.reset(new Device());
        const void *buffers[31];
        size_t lengths[31];
        unsigned char bound[31];
        for (int i = 0; i < 31; ++i) {
            buffers[i] = bindings[i].address;
            lengths[i] = bindings[i].length;
            bound[i] = bindings[i].bound;
        }
        size_t dynamic = 0;
        for (int i = 0; i < 31; ++i) dynamic += (threadgroup_lengths[i] + 15) / 16 * 16;
        if (dynamic > THREADGROUP_LIMIT)
            throw Failure{std::string("kernel ") + name + ": " + std::to_string(dynamic) +
                          " bytes of threadgroup memory set by the host, more than 32768"};
        Rng rng{seed ^ 0x6D6574616C656D75ull};
        const uint64_t n_groups = uint64_t(grid[0]) * grid[1] * grid[2];
        std::vector<uint64_t> order(n_groups);
        for (uint64_t i = 0; i < n_groups; ++i) order[i] = i;
        for (uint64_t i = n_groups; i > 1; --i) std::swap(order[i - 1], order[rng.next() % i]);
        std::vector<std::unique_ptr<unsigned char[]>> tg_memory(31);
        void *tg_pointers[31] = {};
        for (int i = 0; i < 31; ++i)
            if (threadgroup_lengths[i]) {
                tg_memory[i].reset(new unsigned char[threadgroup_lengths[i] + 16]);
                tg_pointers[i] = reinterpret_cast<void *>(
                    (reinterpret_cast<uintptr_t>(tg_memory[i].get()) + 15) & ~uintptr_t(15));
            }
        const uint32_t nthreads = uint32_t(per);
        Group g;
        g.lanes = &dev->lanes;
        g.threads = nthreads;
        g.kernel_name = k->name;
        g.entry = k->entry;
        g.dynamic_bytes = dynamic;
        for (uint64_t gi : order) {
            const uint32_t gx = uint32_t(gi % grid[0]), gy = uint32_t(gi / grid[0] % grid[1]),
                           gz = uint32_t(gi / (uint64_t(grid[0]) * grid[1]));
            g.variables.clear();
            g.variable_bytes = 0;
            for (int i = 0; i < 31; ++i)
                if (tg_pointers[i]) std::memset(tg_pointers[i], 0xFF, threadgroup_lengths[i]);
            for (uint32_t t = 0; t < nthreads; ++t) {
                Lane &l = dev->lanes[t];
                l.group = &g;
                l.index = t;
                l.wait = Wait::running;
                l.simd_generation = 0;
                l.tg_variables = 0;
                const uint32_t tx = t % threads[0], ty = t / threads[0] % threads[1],
                               tz = t / (threads[0] * threads[1]);
                Call &c = l.call;
                c.buffers = buffers;
                c.lengths = lengths;
                c.bound = bound;
                c.tg_memory = tg_pointers;
                c.tg_lengths = threadgroup_lengths;
                c.kernel_name = k->name;
                auto set = [&](Attr a, uint32_t x, uint32_t y, uint32_t z) {
                    c.values[int(a)][0] = x;
                    c.values[int(a)][1] = y;
                    c.values[int(a)][2] = z;
                };
                set(Attr::thread_position_in_grid, gx * threads[0] + tx, gy * threads[1] + ty,
                    gz * threads[2] + tz);
                set(Attr::thread_position_in_threadgroup, tx, ty, tz);
                set(Attr::threadgroup_position_in_grid, gx, gy, gz);
                set(Attr::threads_per_threadgroup, threads[0], threads[1], threads[2]);
                set(Attr::threadgroups_per_grid, grid[0], grid[1], grid[2]);
                set(Attr::threads_per_grid, grid[0] * threads[0], grid[1] * threads[1],
                    grid[2] * threads[2]);
                set(Attr::thread_index_in_threadgroup, t, 0, 0);
                set(Attr::thread_index_in_simdgroup, t % 32, 0, 0);
                set(Attr::simdgroup_index_in_threadgroup, t / 32, 0, 0);
                set(Attr::threads_per_simdgroup, 32, 0, 0);
                set(Attr::simdgroups_per_threadgroup, (nthreads + 31) / 32, 0, 0);
                prepare(l);
            }
            run_group(g, rng);
        }
        return 0;
    } catch (const Failure &f) {
        // the fibers of a failed group are abandoned mid-kernel: their stacks are reused, and
        // nothing on them needs destroying (the kernels hold no C++ objects)
        std::snprintf(error, error_len, "%s", f.message.c_str());
        return 1;
    }
}
