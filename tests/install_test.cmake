# Installs the build tree into a scratch prefix, then configures, builds and runs tests/install_consumer
# against it with find_package(saccade). Invoked by CTest with -DBUILD_DIR, -DSOURCE_DIR, -DWORK_DIR and
# -DWITH_HF (1 when the build has hf/: then the consumer's hf_consumer must build against saccade::hf and run).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install_consumer -B ${WORK_DIR}/build
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
                        -DSACCADE_CONSUMER_HF=${WITH_HF}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${WORK_DIR}/build/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "consumer: ${out}")
if(rc)
  message(FATAL_ERROR "the consumer computed a wrong gradient: ${out}")
endif()
if(WITH_HF)
  file(MAKE_DIRECTORY ${WORK_DIR}/hf)
  execute_process(COMMAND ${WORK_DIR}/build/hf_consumer ${WORK_DIR}/hf RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  message(STATUS "hf_consumer: ${out}")
  if(rc)
    message(FATAL_ERROR "the hf consumer read a wrong config or encoded wrong ids (${rc}): ${out}")
  endif()
endif()
