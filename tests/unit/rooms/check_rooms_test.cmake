# unit.rooms: the include check that guards analyze/'s rooms
# (cmake/check_room_includes.cmake) refuses an include of a room that is not
# on the link line, naming the file and the room, and accepts allowed ones.
set(check ${SRCDIR}/cmake/check_room_includes.cmake)
set(here ${SRCDIR}/tests/unit/rooms)

execute_process(COMMAND ${CMAKE_COMMAND} -DROOM=cachesim -DALLOWED=cachesim,symbols
                        -DFILES=${here}/forbidden.cpp -P ${check}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "the check accepted cachesim including calc/cfg.h")
endif()
if(NOT err MATCHES "room cachesim may not include ecpi/analyze/calc/cfg.h")
  message(FATAL_ERROR "the refusal does not name the header: ${err}")
endif()
if(err MATCHES "symbols/symbolizer.h|text_table.h")
  message(FATAL_ERROR "the check refused an allowed include: ${err}")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -DROOM=layout -DALLOWED=layout,calc,symbols
                        -DFILES=${here}/allowed.cpp -P ${check}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the check refused layout's allowed includes: ${err}")
endif()
message(STATUS "room check: refuses a forbidden include, accepts allowed ones")
