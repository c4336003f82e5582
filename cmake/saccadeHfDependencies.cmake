# Installed with saccade::hf (hf/CMakeLists.txt) and included by saccadeConfig.cmake: the libraries
# libsaccade_hf links, as the imported targets its exported link interface names (PkgConfig::PCRE2,
# PkgConfig::SENTENCEPIECE, PkgConfig::UTF8PROC), found through pkg-config as the build found them. One that
# is missing leaves the core usable and says why saccade::hf is not.
find_package(PkgConfig QUIET)
foreach(dep "PCRE2;libpcre2-8" "SENTENCEPIECE;sentencepiece" "UTF8PROC;libutf8proc")
  list(GET dep 0 prefix)
  list(GET dep 1 module)
  if(NOT TARGET PkgConfig::${prefix})
    if(PkgConfig_FOUND)
      pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
    endif()
    if(NOT TARGET PkgConfig::${prefix})
      message(WARNING "saccade::hf needs ${module} (found through pkg-config), which is not found")
    endif()
  endif()
endforeach()
