// Capstone loaded at first use (contract in include/ecpi/analyze/symbols/capstone_library.h).
#include "ecpi/analyze/symbols/capstone_library.h"

#include <string>

#include "ecpi/shared_library.h"

namespace ecpi::analyze {

namespace {

Result<CapstoneApi> bind_capstone(const SharedLibrary& lib) {
    CapstoneApi api;
    ECPI_RETURN_IF_ERROR(lib.bind("cs_open", api.open));
    ECPI_RETURN_IF_ERROR(lib.bind("cs_close", api.close));
    ECPI_RETURN_IF_ERROR(lib.bind("cs_option", api.option));
    ECPI_RETURN_IF_ERROR(lib.bind("cs_malloc", api.insn_malloc));
    ECPI_RETURN_IF_ERROR(lib.bind("cs_free", api.insn_free));
    ECPI_RETURN_IF_ERROR(lib.bind("cs_disasm_iter", api.disasm_iter));
    ECPI_RETURN_IF_ERROR(lib.bind("cs_reg_name", api.reg_name));
    ECPI_RETURN_IF_ERROR(lib.bind("cs_regs_access", api.regs_access));
    return api;
}

}  // namespace

const char* capstone_soname() { return ECPI_CAPSTONE_SONAME; }

Result<const CapstoneApi*> capstone_api(const std::string& soname) {
    static LoadedOnce<CapstoneApi> loaded;
    return loaded.get(soname, [&]() -> Result<CapstoneApi> {
        // Debian names the package after the SONAME's version: libcapstone.so.4 in libcapstone4.
        const std::size_t so = soname.rfind(".so.");
        const std::string package = "libcapstone" + (so != std::string::npos ? soname.substr(so + 4) : std::string());
        ECPI_ASSIGN_OR_RETURN(SharedLibrary lib, SharedLibrary::open(soname, package, "to disassemble"));
        return bind_capstone(lib);
    });
}

}  // namespace ecpi::analyze
