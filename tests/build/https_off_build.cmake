# Configures and builds fetchd with FETCHD_HTTPS=OFF, then checks it refuses an https:// endpoint with a
# message that names the option. Run by CTest (label slow) with SOURCE_DIR and BINARY_DIR set.
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G Ninja -DFETCHD_HTTPS=OFF -DBUILD_TESTING=OFF
          -DENGINE_CUDA=OFF
  RESULT_VARIABLE configured)
if(NOT configured EQUAL 0)
  message(FATAL_ERROR "configuring with FETCHD_HTTPS=OFF failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} --target fetchd serverd RESULT_VARIABLE built)
if(NOT built EQUAL 0)
  message(FATAL_ERROR "building with FETCHD_HTTPS=OFF failed")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env HF_ENDPOINT=https://hub.invalid ${BINARY_DIR}/fetchd/fetchd pull --model org/repo
  RESULT_VARIABLE status ERROR_VARIABLE stderr)
if(NOT status EQUAL 8 OR NOT stderr MATCHES "FETCHD_HTTPS=ON" OR NOT stderr MATCHES "http://")
  message(FATAL_ERROR "expected exit 8 and a message naming FETCHD_HTTPS=ON and http://, got ${status}: ${stderr}")
endif()
message(STATUS "HTTPS-off build refuses https:// as expected: ${stderr}")
