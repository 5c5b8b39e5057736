# cmake -DROOM=name -DALLOWED=a,b -DFILES=f1,f2 -P check_room_includes.cmake
# Fails when a file of room ROOM includes a header of a room not in ALLOWED
# (include/ecpi/analyze/<room>/...). Headers directly under
# include/ecpi/analyze/ (text_table.h) are shared by every room.
string(REPLACE "," ";" allowed "${ALLOWED}")
string(REPLACE "," ";" files "${FILES}")
string(REPLACE ";" ", " allowed_text "${allowed}")
set(bad "")
foreach(f ${files})
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]ecpi/analyze/[a-z_]+/")
  foreach(line ${lines})
    string(REGEX MATCH "ecpi/analyze/([a-z_]+)/" _ "${line}")
    set(room ${CMAKE_MATCH_1})
    list(FIND allowed ${room} at)
    if(at EQUAL -1)
      string(REGEX MATCH "ecpi/analyze/[a-z_]+/[A-Za-z0-9_.]+" header "${line}")
      string(APPEND bad "room ${ROOM} may not include ${header} (${f}): room ${room} is not on its link line (analyze/${ROOM}/CMakeLists.txt lets it use ${allowed_text}); move the code, or add ${room} to its USES if the systems really depend so\n")
    endif()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "${bad}")
endif()
