# What `cmake --install build --prefix P` lays out, and the packages `cpack` builds from it:
#   P/bin/vramlabd, vramlab, vramlab-worker        (those this tree builds)
#   P/lib/systemd/system/vramlabd.service
#   P/share/doc/vramlab/                            README.md, docs/*.md and copyright
#   P/share/vramlab/{grafana,prometheus}/           dashboards, provisioning, scrape config, alerts
#   P/share/bash-completion/completions/vramlab
#   P/share/zsh/vendor-completions/_vramlab when P is /usr (Debian's place for packages),
#   P/share/zsh/site-functions/_vramlab under any other prefix (/usr/local: where zsh looks)
# On a GPU host the worker and the rest are two build trees (scripts/gpu-build.sh); each installs
# what it built into the same prefix.

foreach(binary vramlabd vramlab vramlab-worker)
  if(TARGET ${binary})
    install(TARGETS ${binary} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

if(TARGET vramlab)
  # The completion scripts, printed by the vramlab just built so they match its flags.
  set(completion_dir ${CMAKE_BINARY_DIR}/completions)
  add_custom_command(
    OUTPUT ${completion_dir}/vramlab ${completion_dir}/_vramlab
    COMMAND ${CMAKE_COMMAND} -E make_directory ${completion_dir}
    COMMAND sh -c "\"$1\" completion bash > \"$2\" && \"$1\" completion zsh > \"$3\"" sh
            $<TARGET_FILE:vramlab> ${completion_dir}/vramlab ${completion_dir}/_vramlab
    DEPENDS vramlab
    COMMENT "Shell completion scripts"
    VERBATIM)
  add_custom_target(vramlab_completions ALL
                    DEPENDS ${completion_dir}/vramlab ${completion_dir}/_vramlab)
  install(FILES ${completion_dir}/vramlab
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
  # zsh searches PREFIX/share/zsh/site-functions for its own prefix and /usr/local; Debian's zsh
  # also /usr/share/zsh/vendor-completions, the packages' directory, which no zsh searches under
  # /usr/local. The prefix is known only at install time (cmake --install --prefix, cpack).
  install(CODE "
    if(CMAKE_INSTALL_PREFIX MATCHES \"(^|/)usr/?$\")
      set(zsh_dir vendor-completions)
    else()
      set(zsh_dir site-functions)
    endif()
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/zsh/\${zsh_dir}\"
         TYPE FILE FILES \"${completion_dir}/_vramlab\")
  ")
endif()

if(VRAMLAB_BUILD_SERVER)
  set(deploy_dir ${CMAKE_SOURCE_DIR}/deploy)
  if(EXISTS ${deploy_dir}/systemd/vramlabd.service)
    # The unit names /usr/local/bin/vramlabd and /usr/local/bin/vramlab-worker; the installed copy
    # names the prefix it is installed into (/usr in the .deb). The prefix is known only at install
    # time. A .tar.gz from cpack is staged elsewhere and keeps /usr/local: unpack it there.
    install(CODE "
      set(unit_prefix \"\${CMAKE_INSTALL_PREFIX}\")
      if(unit_prefix MATCHES \"/_CPack_Packages/\")
        set(unit_prefix /usr/local)
      endif()
      file(READ \"${deploy_dir}/systemd/vramlabd.service\" unit)
      string(REPLACE /usr/local/bin/ \"\${unit_prefix}/${CMAKE_INSTALL_BINDIR}/\" unit \"\${unit}\")
      string(REPLACE /usr/local/share/doc/vramlab/ \"\${unit_prefix}/${CMAKE_INSTALL_DOCDIR}/\"
             unit \"\${unit}\")
      file(WRITE \"${CMAKE_BINARY_DIR}/systemd/vramlabd.service\" \"\${unit}\")
      file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\" TYPE FILE
           FILES \"${CMAKE_BINARY_DIR}/systemd/vramlabd.service\")
    ")
  endif()
  foreach(dir grafana prometheus)
    if(IS_DIRECTORY ${deploy_dir}/${dir})
      # The rules' promtool unit tests (prometheus/tests) are for the source tree only.
      install(DIRECTORY ${deploy_dir}/${dir} DESTINATION ${CMAKE_INSTALL_DATADIR}/vramlab
              PATTERN tests EXCLUDE)
    endif()
  endforeach()
  # The command probe, where vramlabd looks for it (bin/../share/vramlab/probe).
  if(IS_DIRECTORY ${CMAKE_SOURCE_DIR}/probe)
    install(DIRECTORY ${CMAKE_SOURCE_DIR}/probe/ DESTINATION ${CMAKE_INSTALL_DATADIR}/vramlab/probe
            PATTERN __pycache__ EXCLUDE)
  endif()
  file(GLOB doc_files ${CMAKE_SOURCE_DIR}/docs/*.md)
  # `copyright` is where Debian policy puts a package's copyright and license statement.
  install(FILES ${CMAKE_SOURCE_DIR}/README.md ${doc_files} ${CMAKE_SOURCE_DIR}/cmake/debian/copyright
          DESTINATION ${CMAKE_INSTALL_DOCDIR})
endif()

# cpack (in the build directory) writes vramlab_VERSION_ARCH.deb and vramlab-VERSION-Linux.tar.gz.
# The .deb installs under /usr; its Depends come from dpkg-shlibdeps, which needs every linked
# library to belong to an installed package: turn VRAMLAB_DEB_SHLIBDEPS off where some come from
# elsewhere (a prefix of unpacked packages, a PyTorch wheel), as scripts/gpu-build.sh does.
option(VRAMLAB_DEB_SHLIBDEPS "Compute the .deb's Depends with dpkg-shlibdeps" ON)
set(CPACK_PACKAGE_NAME vramlab)
set(CPACK_PACKAGE_VENDOR vramlab)
set(CPACK_PACKAGE_CONTACT "vramlab maintainers <vramlab@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "GPU-memory laboratory for LLM fine-tuning: vramlabd daemon, vramlab CLI and LibTorch worker")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}
vramlabd queues fine-tuning experiments submitted over gRPC, runs each in an isolated
worker process, records GPU memory live and exports Prometheus metrics. The package holds the
daemon, the vramlab client and (where built) vramlab-worker, a systemd unit (not enabled),
Grafana dashboards, Prometheus rules, shell completions and the documentation.")
set(CPACK_GENERATOR DEB TGZ)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ${VRAMLAB_DEB_SHLIBDEPS})
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/cmake/debian/postinst ${CMAKE_SOURCE_DIR}/cmake/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
