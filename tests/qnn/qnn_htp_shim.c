/*
 * libQnnHtp.so shim: lets ExecuTorch 1.5.1 (built against QNN 2.37) drive the QNN 2.51 HTP
 * library that the onnxruntime-qnn 2.7.0 wheel ships for x86-64 (the only x86-64 QNN libraries,
 * HTP simulator included, that pip can fetch here).
 *
 * Why it exists: between QNN 2.37 and 2.51 the HTP *device* custom config changed layout.
 * ExecuTorch writes {uint32 option; uint32 socModel; ...} (payload at byte 4); the 2.51 library
 * reads the payload from byte 8, sees socModel 0 and QnnDevice_create fails with 14001
 * ("unknown custom config socModel 0"). This library is installed as libQnnHtp.so next to the real
 * library (renamed libQnnHtpReal.so); it forwards QnnInterface_getProviders to the real library
 * and wraps each provider's deviceCreate so every HTP device custom config is re-packed
 * (option word kept, words 1..6 moved to start at byte 8) before the real call. Graph custom
 * configs already have the new layout and pass untouched. Users with a QNN SDK that matches
 * their ExecuTorch need none of this.
 *
 * Layout facts (QNN 2.51, x86-64): a provider (QnnInterface_t) holds its function table from
 * byte 40; entry 40 of the table is deviceCreate. The table lives in a read-only page, so it is
 * mprotect'ed writable to patch. A device config is {uint32 option; uint32 pad; void *custom};
 * option 0 is "custom".
 *
 * Link with -z nodelete: ExecuTorch dlopens and dlcloses the library to read its version, and
 * the patched table must keep pointing at live code.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef uint64_t Qnn_ErrorHandle_t;
typedef Qnn_ErrorHandle_t (*GetProvidersFn)(const void ***providers, uint32_t *num);
typedef Qnn_ErrorHandle_t (*DeviceCreateFn)(void *logger, const void **config, void **device);

#define TABLE_OFFSET 40
#define DEVICE_CREATE_INDEX 40
#define MAX_CONFIGS 64

static DeviceCreateFn real_device_create;
static GetProvidersFn real_get_providers;

typedef struct {
  uint32_t option;
  uint32_t pad;
  void *custom;
} DeviceConfig;

static Qnn_ErrorHandle_t shim_device_create(void *logger, const void **config, void **device) {
  if (config == NULL) return real_device_create(logger, config, device);
  static DeviceConfig copies[MAX_CONFIGS];
  static uint32_t payloads[MAX_CONFIGS][8];
  static const void *list[MAX_CONFIGS + 1];
  int n = 0;
  for (; config[n] != NULL && n < MAX_CONFIGS; ++n) {
    const DeviceConfig *c = (const DeviceConfig *)config[n];
    copies[n] = *c;
    if (c->option == 0 && c->custom != NULL) {
      const uint32_t *old = (const uint32_t *)c->custom;
      memset(payloads[n], 0, sizeof payloads[n]);
      payloads[n][0] = old[0];
      for (int w = 1; w <= 6; ++w) payloads[n][w + 1] = old[w];
      copies[n].custom = payloads[n];
    }
    list[n] = &copies[n];
  }
  list[n] = NULL;
  return real_device_create(logger, list, device);
}

static int load_real(void) {
  if (real_get_providers) return 0;
  Dl_info info;
  if (!dladdr((void *)&load_real, &info) || info.dli_fname == NULL) return -1;
  char path[4096];
  snprintf(path, sizeof path, "%s", info.dli_fname);
  char *slash = strrchr(path, '/');
  if (slash) slash[1] = '\0'; else path[0] = '\0';
  strncat(path, "libQnnHtpReal.so", sizeof path - strlen(path) - 1);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    fprintf(stderr, "qnn shim: cannot load %s: %s\n", path, dlerror());
    return -1;
  }
  real_get_providers = (GetProvidersFn)dlsym(h, "QnnInterface_getProviders");
  return real_get_providers ? 0 : -1;
}

static void patch_provider(const void *provider) {
  void **table = (void **)((char *)provider + TABLE_OFFSET);
  void **slot = &table[DEVICE_CREATE_INDEX];
  if (*slot == (void *)&shim_device_create) return;
  if (real_device_create == NULL) real_device_create = (DeviceCreateFn)*slot;
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = (uintptr_t)slot & ~(uintptr_t)(page - 1);
  if (mprotect((void *)start, (size_t)page, PROT_READ | PROT_WRITE) != 0) {
    perror("qnn shim: mprotect");
    return;
  }
  *slot = (void *)&shim_device_create;
}

__attribute__((visibility("default")))
Qnn_ErrorHandle_t QnnInterface_getProviders(const void ***providers, uint32_t *num) {
  if (load_real() != 0) return 1;
  Qnn_ErrorHandle_t err = real_get_providers(providers, num);
  if (err != 0 || providers == NULL || *providers == NULL || num == NULL) return err;
  for (uint32_t i = 0; i < *num; ++i) patch_provider((*providers)[i]);
  return err;
}
