# Rooms of analyze/ (STYLE.md rule 15): one static library per system the
# papers name, plus the shared symbol layer. ecpi_room() creates the library
# and records which rooms it may use; a build step checks every #include of
# the room's sources and public headers against that list, so an include of a
# room that the link line does not name fails the build with one line naming
# the file, the room it reached and the rule (cmake/check_room_includes.cmake).
set(ECPI_ROOMS_DIR ${CMAKE_CURRENT_LIST_DIR})

# ecpi_room(NAME SOURCES src... USES room... LIBS target...)
function(ecpi_room name)
  cmake_parse_arguments(ROOM "" "" "SOURCES;USES;LIBS" ${ARGN})
  set(target ecpi_${name})
  add_library(${target} STATIC ${ROOM_SOURCES})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/runtime)
  set(room_targets "")
  foreach(u ${ROOM_USES})
    list(APPEND room_targets ecpi_${u})
  endforeach()
  target_link_libraries(${target} PUBLIC ecpi_store nlohmann_json::nlohmann_json ${room_targets} PRIVATE ${ROOM_LIBS})
  target_compile_options(${target} PRIVATE ${ECPI_WARNINGS})

  # The rooms this one may include: itself and the closure of what it uses.
  set(allowed ${name})
  foreach(u ${ROOM_USES})
    get_property(closure GLOBAL PROPERTY ECPI_ROOM_CLOSURE_${u})
    if(NOT DEFINED closure OR closure STREQUAL "")
      message(FATAL_ERROR "room ${name} uses room ${u}, which is not defined yet: define ${u} first")
    endif()
    list(APPEND allowed ${closure})
  endforeach()
  list(REMOVE_DUPLICATES allowed)
  set_property(GLOBAL PROPERTY ECPI_ROOM_CLOSURE_${name} ${allowed})

  file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/ecpi/analyze/${name}/*.h)
  set(checked "")
  foreach(s ${ROOM_SOURCES} ${headers})
    if(NOT s MATCHES "^${CMAKE_BINARY_DIR}")  # generated sources include nothing of ours
      get_filename_component(abs ${s} ABSOLUTE)
      list(APPEND checked ${abs})
    endif()
  endforeach()
  set(stamp ${CMAKE_CURRENT_BINARY_DIR}/${target}_includes.stamp)
  string(REPLACE ";" "," allowed_csv "${allowed}")
  string(REPLACE ";" "," checked_csv "${checked}")
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DROOM=${name} -DALLOWED=${allowed_csv} -DFILES=${checked_csv}
            -P ${ECPI_ROOMS_DIR}/check_room_includes.cmake
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    DEPENDS ${checked} ${ECPI_ROOMS_DIR}/check_room_includes.cmake
    COMMENT "checking the includes of room ${name}"
    VERBATIM)
  add_custom_target(${target}_includes DEPENDS ${stamp})
  add_dependencies(${target} ${target}_includes)
endfunction()
